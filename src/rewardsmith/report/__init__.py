"""Reports: plain metrics dicts -> report.md / report.html (render.py) and PNG plots (plots.py), one module per
job laying out its document (train.py, w2s.py, icrm.py, calibrate.py). Computes no metric itself."""
