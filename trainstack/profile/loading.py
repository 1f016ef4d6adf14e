"""From a file or a parsed document to a validated :class:`TrainingProfile`.

``load_profile(path)`` is the only way in from a file: every user mistake (missing file, bad YAML,
wrong field, misspelt key or preset, secret in plain text) becomes an
:class:`~trainstack.errors.InputError` listing one problem per line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from pydantic import ValidationError

from ..models import preset_names
from ..errors import InputError, Problem
from ..secrets import find_secrets
from .model import TrainingProfile
from .problems import dedupe, problem_from
from .yamlfile import read_yaml_document


def load_profile(path: Union[str, Path]) -> TrainingProfile:
    """Load and validate a profile file."""
    return parse_profile(read_yaml_document(path), file=str(path), base_dir=Path(path).resolve().parent)


def parse_profile(doc: Any, file: Optional[str] = None, base_dir: Optional[Path] = None) -> TrainingProfile:
    """Validate an already-parsed document; all problems are reported together.

    ``base_dir`` is where relative paths in the profile (``model.hf_config``) start: the profile
    file's folder (``load_profile``), else the working directory.
    """
    if not isinstance(doc, dict):
        raise InputError("profile must be a mapping", problems=[
            Problem(path="", message="profile must be a YAML mapping", file=file,
                    given=type(doc).__name__, has_given=True)])
    if "model_type" in doc and "name" not in doc and "model" not in doc:
        raise InputError(f"{file or 'profile'}: a Hugging Face config.json, not a training profile", problems=[
            Problem(path="", message="this is a Hugging Face config.json, not a training profile", file=file)],
            hint="write a profile that points at it: `name: my-job` and `model: {hf_config: config.json}` "
                 "(the path is relative to the profile file)")
    secret_problems = [Problem(path=p, message=m, file=file) for p, m in find_secrets(doc)]
    try:
        profile = TrainingProfile.model_validate(doc, context={"profile_dir": base_dir})
    except ValidationError as exc:
        problems = secret_problems + [problem_from(e, doc, file) for e in exc.errors()]
        raise InputError(f"{file or 'profile'}: {len(problems)} problem(s)", problems=dedupe(problems)) from None
    except (RecursionError, OverflowError) as exc:
        raise InputError(f"{file or 'profile'}: unusable value ({type(exc).__name__})",
                         problems=[Problem(path="", message=f"unusable value: {exc}", file=file)]) from None
    if secret_problems:
        raise InputError(f"{file or 'profile'}: secrets in plain text", problems=secret_problems,
                         hint="use the Alibaba Cloud credentials chain (env, ~/.alibabacloud/credentials.ini or ~/.aliyun/config.json, "
                              "RAM role) or `pulumi config set --secret`")
    return profile


def profile_json_schema() -> dict[str, Any]:
    """JSON Schema of the profile, for editors (`trainstack schema`)."""
    schema = TrainingProfile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "trainstack training profile"
    schema.setdefault("$defs", {})
    schema["properties"]["model"]["description"] = (
        "Exactly one of preset, hf_config, architecture or params_b. Presets (case-insensitive; Hugging Face "
        "repo ids and -instruct/-it/-chat/-base variants accepted): " + ", ".join(preset_names()))
    return schema
