"""`rewardsmith serve`: a batched HTTP reward server for any saved rewardsmith model.

config.py (ServeConfig), requests.py (request bodies of every endpoint and their conversion to texts; long texts
cut before tokenising), engine.py (the model owner: requests tokenised before they are queued, one worker thread
filling token-bounded rounds from every waiting request by fair share, large requests split across rounds,
closing within a deadline), metrics.py (Prometheus metrics on a per-app registry), app.py (the FastAPI app:
routes, limits, authentication, read deadlines, one-line errors, cancelled requests of clients that went away;
`build_app`, `make_server` and its shutdown, `run_server`). Importing this package loads nothing.
"""
