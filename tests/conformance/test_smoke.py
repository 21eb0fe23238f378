import jobtrail


def test_enqueue_and_run(app: jobtrail.App) -> None:
    seen = []

    @app.task("echo")
    def echo(ctx, payload):
        seen.append(payload)

    task = app.enqueue("echo", {"n": 1})
    assert task.state == "queued" and task.created
    app.run_worker(burst=True)
    assert seen == [{"n": 1}]
    assert app.get(task.id).state == "succeeded"
    assert [t.reason for t in app.transitions(task.id)] == ["enqueued", "claimed", "completed"]
