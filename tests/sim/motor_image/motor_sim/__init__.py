"""Stand-in for MindIE PyMotor's Python components (controller, coordinator, node manager, engine,
mooncake_master) implementing the container contract of the real image; see ../README.md."""
