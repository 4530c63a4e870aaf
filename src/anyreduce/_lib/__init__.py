"""Internals of anyreduce: nothing here is public API."""
