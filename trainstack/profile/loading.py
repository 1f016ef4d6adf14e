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
from ..secrets import scan, secret_texts
from .model import TrainingProfile
from .problems import dedupe, problem_from
from .yamlfile import read_yaml_document


SECRET_HINT = ("use the Alibaba Cloud credentials chain (env, ~/.alibabacloud/credentials.ini or "
               "~/.aliyun/config.json, RAM role), a KMS secret, or `pulumi config set --secret`")


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
    known = set(TrainingProfile.model_fields)
    if doc and not known & {k for k in doc if isinstance(k, str)}:
        # a file that is not a profile at all (/etc/passwd, a stack file): say so, never list its lines
        raise InputError(f"{file or 'profile'}: not a trainstack profile", problems=[
            Problem(path="", file=file, message=f"not a trainstack profile: none of its {len(doc)} top-level "
                    "keys is a profile field", allowed="name, model and the sections of `trainstack schema`")])
    findings = scan(doc)
    secrets = secret_texts(findings)
    secret_problems = [Problem(path=f.path, message=f.message, file=file) for f in findings]
    try:
        profile = TrainingProfile.model_validate(doc, context={"profile_dir": base_dir})
    except ValidationError as exc:
        flagged = {f.path for f in findings}
        problems = secret_problems + [p for p in (problem_from(e, doc, file) for e in exc.errors())
                                      if p.path not in flagged]
        raise InputError(f"{file or 'profile'}: {len(problems)} problem(s)", problems=dedupe(problems),
                         secrets=secrets, hint=SECRET_HINT if secret_problems else None) from None
    except (RecursionError, OverflowError, ValueError, TypeError) as exc:
        raise InputError(f"{file or 'profile'}: unusable value ({type(exc).__name__})", secrets=secrets,
                         problems=secret_problems + [Problem(path="", message="unusable value", file=file)]) from None
    if secret_problems:
        raise InputError(f"{file or 'profile'}: secrets in plain text", problems=secret_problems,
                         secrets=secrets, hint=SECRET_HINT)
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
