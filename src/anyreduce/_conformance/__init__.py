"""The engine of ``anyreduce conformance`` and ``anyreduce parity`` (see anyreduce.testing)."""
