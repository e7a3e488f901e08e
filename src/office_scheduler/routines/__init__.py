"""Routine service: fire (cron, webhook, manual), variables, templates, policies, catch-up."""
