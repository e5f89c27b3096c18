"""What each command does, end to end: open the run folder (its contract), do the work with the capability
libraries, write metrics.json and the report, and say what was read, dropped, truncated and written. The
CLI and the demo call these; library users can too."""
