"""The benchmark harness of Office Scheduler (``make bench``; see ``bench/README.md``)."""
