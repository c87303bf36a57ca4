"""Stand-in of PyMotor's examples/deployer/lib (the image keeps it at /tmp/motor/examples/deployer/lib)."""
