"""`rewardsmith serve`: a batched HTTP reward server for any saved rewardsmith model.

config.py (ServeConfig), requests.py (request bodies of every endpoint and their conversion to texts),
engine.py (the model owner: one worker thread merging queued requests into length-grouped, token-bounded
batches), metrics.py (Prometheus metrics on a per-app registry), app.py (the FastAPI app: routes, limits,
authentication, one-line errors; `build_app`, `run_server`). Importing this package loads nothing.
"""
