"""Outbound notifications: channel rules, signing, messages and the delivery pass."""
