"""The part of PyMotor's examples/deployer/lib/utils.py the startup scripts import (mooncake_config.py)."""


def resolve_model_name(engine_section, default="Unknown"):
    """served_model_name (served-model-name for sglang) of an engine section, else model_config.model_name."""
    engine_config = engine_section.get("engine_config", {})
    key = "served-model-name" if engine_section.get("engine_type", "vllm") == "sglang" else "served_model_name"
    return engine_config.get(key) or engine_section.get("model_config", {}).get("model_name", default)
