"""`rewardsmith serve`: a batched HTTP reward server for any saved rewardsmith model.

config.py (ServeConfig), requests.py (request bodies of every endpoint and their conversion to texts; long texts
cut before tokenising), engine.py (the model owner: requests tokenised before they are queued, one worker thread
filling token-bounded rounds from every waiting request by fair share, large requests split across rounds,
closing within a deadline), metrics.py (Prometheus metrics on a per-app registry), monitors.py (reward-hacking
monitors over the scored stream), state.py (what the routes share; a request scored, cancelled when its client
goes away), gate.py (limits, authentication, read deadlines, one-line errors), routes.py (the endpoints),
lifecycle.py (socket, header deadline, lifespan and graceful shutdown: `make_server`), app.py (`build_app`
assembling them, `run_server`). Importing this package loads nothing.
"""
