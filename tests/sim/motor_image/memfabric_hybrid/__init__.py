"""memfabric_hybrid stand-in: only the config store launcher (python3 -m memfabric_hybrid.launch_ascend_mf_store)."""
