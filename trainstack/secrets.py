"""Find credentials where they must never be: profiles, stack config, plan output, error messages.

A profile names *where* credentials come from (the Alibaba Cloud credentials chain, a KMS secret,
`pulumi config set --secret`); it never holds them. Two kinds of evidence, both checked on every
key and value of a document:

* **Secret-named keys** in any case style (``DB_PWD``, ``authToken``, ``my-api-key``,
  ``GITLAB_PAT``): the key is split into words and its last word (or an unmistakable pair such as
  *access key*, *api key*, *client secret*) names a secret; so does *key* after a service's name
  (``wandb_key``, ``OPENAI_KEY``, ``HF_KEY``) or a word that makes it a credential (``license_key``,
  ``ssh_key``). Counts and references stay ordinary names: ``MAX_TOKENS``, ``TOKEN_LIMIT``,
  ``NUM_PASSES``, ``TOKENIZERS_PARALLELISM``, ``tokens``, ``PASSWORD_FILE``, ``SECRET_NAME``,
  ``--tokenizer-model``, ``--max_new_tokens``, ``sort_key``. Any other ``*_key`` name counts when
  its value is a generated token (24+ letters and digits, high entropy: ``--foo_key <40 hex>``).
* **Credential-shaped values**, by the published formats (prefixes and lengths as in gitleaks'
  default rules, gitleaks/gitleaks config/gitleaks.toml @ 009e025a, and the vendors' token docs):
  Alibaba Cloud AccessKey IDs (``LTAI...``), 30-character AccessKey secrets, STS tokens
  (``CAIS...``), AWS key IDs (``AKIA``/``ASIA``/``ABIA``/``ACCA``), GitHub (``ghp_``...,
  ``github_pat_``), GitLab (``glpat-``), OpenAI-style (``sk-``, ``sk-proj-``), Hugging Face
  (``hf_``), Slack webhook URLs, JWTs, ``Bearer`` tokens, PEM/OpenSSH/PGP private keys, credentials in URIs
  (``user:pass@``, signed query strings), and secret-named flags or assignments inside a command
  line (``--password X``, ``HF_TOKEN=...``).

Why not detect-secrets: its plugins know none of Alibaba's three shapes, nor ``hf_`` or the
``sk-proj-`` format, and they scan source lines with keyword heuristics tuned for code; profiles
are structured key/value documents, so focused rules over keys and values are both stricter and
quieter (the no-false-alarm list in tests/trainstack/test_secrets.py holds them to that).

A finding never carries the secret into a message: :func:`scrub` removes every detected value
from text that is about to be printed (error messages included).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

REDACTED = "***redacted***"

# ---- key names ---------------------------------------------------------------------------------

#: a key whose last word is one of these names a secret
_SECRET_LAST_WORDS = {
    "password", "passwd", "pwd", "pass", "passphrase", "secret", "secrets", "token", "tokens", "apikey",
    "credential", "credentials", "creds", "pat", "sk", "ak", "signature", "privatekey", "accesskey", "bearer",
    "authorization",
}
#: these words make a key secret wherever they stand
_SECRET_ANY_WORDS = {"password", "passwd", "passphrase", "credentials", "privatekey", "accesskey", "apikey"}
#: word pairs that make a key secret wherever they stand (``ACCESS_KEY_ID``, ``x-api-key-header``)
_SECRET_PAIRS = {("access", "key"), ("api", "key"), ("private", "key"), ("secret", "key"), ("client", "secret"),
                 ("session", "token"), ("secret", "access"), ("security", "token"), ("auth", "token")}
#: "<service> key" holds that service's credential (WANDB_KEY, --openai_key, HF_KEY): the ML and cloud
#: services a training job talks to (trackers, model hubs, model APIs, clouds, notifications)
_SERVICE_WORDS = {
    "wandb", "comet", "neptune", "clearml", "mlflow", "aim", "openai", "anthropic", "claude", "cohere", "mistral",
    "groq", "together", "replicate", "deepseek", "moonshot", "zhipu", "qwen", "dashscope", "qianfan", "baidu",
    "ernie", "gemini", "google", "gcp", "azure", "aws", "s3", "oss", "aliyun", "alibaba", "alicloud", "hf",
    "huggingface", "modelscope", "github", "gitlab", "kaggle", "pinecone", "weaviate", "slack", "discord",
    "telegram", "feishu", "lark", "dingtalk", "wechat", "sentry", "datadog", "ngrok", "stripe", "sendgrid",
    "twilio", "langsmith", "langchain", "serpapi", "tavily", "jina", "voyage", "nvidia", "ngc", "docker",
}
#: words that make "<word> key" a credential whatever service it is for (LICENSE_KEY, SIGNING_KEY)
_KEY_QUALIFIERS = {"license", "licence", "signing", "encryption", "master", "ssh", "deploy", "service", "account",
                   "user", "admin", "client", "session", "auth", "app", "upload", "write", "root", "secret",
                   "private", "access", "api"}
#: "<word> key" names that are data, not credentials (a dataset column, a cache or sort key): never
#: counted by the token-shaped value rule either
_DATA_KEY_WORDS = {"sort", "cache", "primary", "partition", "foreign", "hash", "input", "output", "label", "text",
                   "prompt", "response", "chosen", "rejected", "image", "images", "message", "messages", "column",
                   "field", "metric", "lookup", "group", "join", "index", "map", "routing", "shard", "dataset",
                   "data", "audio", "video", "query", "answer", "context", "question", "instruction", "system",
                   "conversation", "target", "source", "feature", "model", "json", "config", "layer", "state",
                   "dict", "seed", "random", "rng", "content", "role", "id", "name"}
#: words that make a key a count or a limit, never a secret (``MAX_TOKENS``, ``NUM_PASSES``)
_QUANTITY_WORDS = {"max", "min", "num", "number", "count", "total", "limit", "limits", "per", "size", "len",
                   "length", "budget", "rate", "parallelism", "http", "inherit"}
#: a key ending in one of these names where a secret lives, not the secret (``PASSWORD_FILE``)
_REFERENCE_WORDS = {"file", "path", "dir", "env", "ref", "name", "url", "uri", "arn", "kms"}
#: keys that hold references or settings, not secrets (normalised: words joined, lower case)
SAFE_KEYS = {"keypair", "keypairname", "keyname", "kmskeyid", "kmssecret", "secretref", "secretname",
             "tokens", "httptokens", "passwordinherit", "secrets"}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def key_words(key: str) -> list[str]:
    """``authToken`` -> [auth, token]; ``DB_PWD`` -> [db, pwd]; ``APIKey`` -> [api, key]."""
    return [w.lower() for w in _SPLIT.split(_CAMEL.sub("_", key)) if w]


def is_secret_name(key: str) -> bool:
    """Whether a key or flag name says it holds a secret (in any case style)."""
    words = key_words(key)
    if not words or "".join(words) in SAFE_KEYS:
        return False
    if any(w in _QUANTITY_WORDS for w in words) or words[-1] in _REFERENCE_WORDS:
        return False
    if words[-1] in _SECRET_LAST_WORDS or any(w in _SECRET_ANY_WORDS for w in words):
        return True
    if words[-1] == "key" and len(words) > 1 and (
            words[-2] in _KEY_QUALIFIERS or any(w in _SERVICE_WORDS for w in words[:-1])):
        return True
    return any(pair in _SECRET_PAIRS for pair in zip(words, words[1:]))


def is_key_name(key: str) -> bool:
    """A ``*_key`` name that is neither a known credential nor a known data key (``foo_key``): its
    value counts as a secret when it is a generated token (:func:`token_like`)."""
    words = key_words(key)
    return (len(words) > 1 and words[-1] == "key" and words[-2] not in _DATA_KEY_WORDS
            and not any(w in _QUANTITY_WORDS for w in words))


_TOKEN = re.compile(r"[A-Za-z0-9_+/=-]{24,512}")


def token_like(value: str) -> bool:
    """A generated secret by its look: 24+ characters of letters and digits (and ``_+/=-``), both
    letters and digits, at least 3.5 bits of entropy per character (hex is 4; a word or a run
    name such as ``llama3-8b-lora-20250101`` is lower), not a path."""
    v = value.strip("\"'")
    if not _TOKEN.fullmatch(v) or v.count("/") > 1 or ("/" in v and "-" in v) or not any(c.isdigit() for c in v) \
            or not any(c.isalpha() for c in v):  # org/model-name is a hub id, not a token
        return False
    counts = [v.count(c) for c in set(v)]
    entropy = -sum(n / len(v) * math.log2(n / len(v)) for n in counts)
    return entropy >= 3.5


# ---- value shapes ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    kind: str
    pattern: re.Pattern
    #: also replaced in machine-made output (plan documents); False for shapes that ordinary
    #: machine data can take (a 30-character run of letters and digits inside base64)
    in_output: bool = True
    #: lower-case literals one of which every match contains: text holding none of them is not
    #: searched (a fast substring test first; plan documents carry long base64 user data)
    hints: tuple[str, ...] = ()


def _mixed(token: str) -> bool:
    return any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)


_B = r"(?<![0-9A-Za-z])"   # a token starts here
_E = r"(?![0-9A-Za-z])"    # a token ends here
SHAPES: tuple[Shape, ...] = (
    Shape("an Alibaba Cloud AccessKey ID", re.compile(_B + r"(?i:LTAI)[0-9A-Za-z]{8,30}" + _E), hints=("ltai",)),
    Shape("an Alibaba Cloud STS security token", re.compile(_B + r"CAIS[0-9A-Za-z+/=_-]{20,}"), hints=("cais",)),
    Shape("an AWS access key ID", re.compile(_B + r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}" + _E),
          hints=("akia", "asia", "abia", "acca", "a3t")),
    Shape("a GitHub token", re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E),
          hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Shape("a GitLab token", re.compile(_B + r"gl(?:pat|dt|ptt|rt|cbt|oas)-[A-Za-z0-9_-]{20,}"),
          hints=("glpat-", "gldt-", "glptt-", "glrt-", "glcbt-", "gloas-")),
    Shape("an API key (sk-...)", re.compile(_B + r"sk-(?:proj-|svcacct-|admin-|ant-[a-z0-9]+-)?[A-Za-z0-9_-]{20,}"),
          hints=("sk-",)),
    Shape("a Hugging Face token", re.compile(_B + r"hf_[A-Za-z0-9]{20,}" + _E), hints=("hf_",)),
    # gitleaks slack-webhook-url (cmd/generate/config/rules/slack.go): the path is the webhook's token
    Shape("a Slack webhook URL", re.compile(r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/"
                                            r"[A-Za-z0-9+/]{43,56}"), hints=("hooks.slack.com",)),
    Shape("a JSON Web Token", re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*"), hints=("eyj",)),
    Shape("a bearer token", re.compile(r"(?i:\bbearer)\s+[A-Za-z0-9._~+/-]{8,}=*"), hints=("bearer",)),
    Shape("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), hints=("-----begin",)),
    Shape("credentials in a URI (user:password@)",
          # the scheme starts a token: without the look-behind a long run of scheme characters (base64
          # user data) is tried from each of its positions, quadratic in its length
          re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@?#]+:[^/\s@?#]+@"), hints=("://",)),
    Shape("a signed URL (credentials in the query string)",
          re.compile(r"(?i)[?&](?:signature|sig|x-oss-signature|x-oss-credential|x-oss-security-token|"
                     r"x-amz-signature|x-amz-credential|x-amz-security-token|security-?token|"
                     r"ossaccesskeyid|accesskeyid|access_?token|auth_?token|password|api_?key)=[^&#\s]+"),
          hints=("?", "&")),
    Shape("an Alibaba Cloud AccessKey secret", re.compile(_B + r"[0-9A-Za-z]{30}" + _E), in_output=False),
)
_ALI_SECRET = SHAPES[-1]
_PRIVATE_KEY = next(s for s in SHAPES if s.kind == "a private key")
#: ``user:pass@registry.example.com/...`` (an image reference with credentials; not ``img:tag@sha256:``)
_IMAGE_CREDENTIALS = re.compile(r"^[^/\s:@]+:[^/\s@]+@(?!sha\d+:)[^/\s@]+[./:]")
#: ``--password X`` / ``--api-key=X`` / ``-p=X`` inside a command line
_FLAG = re.compile(r"(?:^|\s)--?([A-Za-z][A-Za-z0-9_.-]*)(?:=|\s+)([^\s-][^\s]*)")
#: ``HF_TOKEN=value`` (an assignment inside a command line)
_ASSIGN = re.compile(r"(?:^|[\s;&|(`])([A-Za-z_][A-Za-z0-9_]*)=([^\s;&|)]+)")


def _shape_hits(text: str, output: bool = False) -> Iterator[tuple[str, str]]:
    """``(kind, matched text)`` for each credential shape in ``text``."""
    low = text.lower()
    for shape in SHAPES:
        if output and not shape.in_output:
            continue
        if shape.hints and not any(h in low for h in shape.hints):
            continue
        for m in shape.pattern.finditer(text):
            if shape is _ALI_SECRET and not _mixed(m.group(0)):
                continue
            yield shape.kind, m.group(0)
    m = _IMAGE_CREDENTIALS.match(text)
    if m:
        yield "credentials in an image reference (user:password@)", m.group(0)


def _is_reference(value: str) -> bool:
    """``$VAR`` / ``${VAR}`` / ``"$VAR"``: the command reads the secret at run time; it is not here."""
    return bool(re.fullmatch(r"[\"']?\$\{?[A-Za-z_][A-Za-z0-9_]*\}?[\"']?", value))


#: the kinds a command-line hit is reported as (Finding.in_command tells them apart, not the words)
OPTION_KIND, ASSIGNMENT_KIND = "a secret-named command-line option", "a secret-named assignment"


def _command_hits(text: str) -> Iterator[tuple[str, str]]:
    for rx, kind in ((_FLAG, OPTION_KIND), (_ASSIGN, ASSIGNMENT_KIND)):
        for m in rx.finditer(text):
            name, value = m.group(1), m.group(2)
            literal = value.strip("\"'")
            if not literal or _is_reference(value):
                continue
            if is_secret_name(name) or (is_key_name(name) and token_like(literal)):
                yield f"{kind} ({name})", literal


def value_kind(value: str) -> Optional[str]:
    """What kind of credential ``value`` holds (shape or an inline ``--password`` / ``X_TOKEN=``), or None."""
    for kind, _ in _shape_hits(value):
        return kind
    for kind, _ in _command_hits(value):
        return kind
    return None


def looks_secret_value(value: str) -> bool:
    return value_kind(value) is not None


# ---- documents ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """One credential in a document: where, what kind, and the text to scrub (never printed)."""

    path: str
    kind: str
    by_name: bool
    values: tuple[str, ...] = field(default=(), repr=False, compare=False)
    #: a secret-named option or assignment with a literal value inside a command line
    in_command: bool = False

    @property
    def message(self) -> str:
        if self.in_command:
            return (f"holds {self.kind} with its value written out; a credential never goes in a command line "
                    "(it would land in the node files and in Pulumi state): keep it in a KMS secret named in "
                    "job.secrets (job.secrets: {WANDB_API_KEY: {kms_secret: team-wandb-key}}) and pass it as a "
                    "reference, --wandb_key $WANDB_API_KEY")
        if self.by_name:
            return ("looks like a credential (secret-named key); profiles and stack config must not hold "
                    "secrets (use the credentials chain, a KMS secret or `pulumi config set --secret`)")
        return f"holds what looks like {self.kind}; remove it (secrets never belong in a profile)"


def _sub(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def scan(doc: Any, path: str = "", *, max_nodes: int = 200_000) -> list[Finding]:
    """Every credential-like key or value in ``doc`` (iterative; stops after ``max_nodes``)."""
    found: list[Finding] = []
    todo: list[tuple[str, Any]] = [(path, doc)]
    seen = 0
    while todo and seen < max_nodes:
        where, node = todo.pop()
        seen += 1
        if isinstance(node, dict):
            for k, v in reversed(list(node.items())):
                sub = _sub(where, k)
                if isinstance(k, str):
                    hits = list(_shape_hits(k))
                    if hits:
                        found.append(Finding(sub, hits[0][0], False, tuple(h for _, h in hits) + (k,)))
                        continue
                    if is_secret_name(k) and isinstance(v, (str, int, float)) and not isinstance(v, bool) \
                            and str(v).strip():
                        found.append(Finding(sub, "a secret-named key", True, (str(v),)))
                        continue
                    if is_key_name(k) and isinstance(v, str) and token_like(v):
                        found.append(Finding(sub, "a key-named value that is a generated token", True, (v,)))
                        continue
                todo.append((sub, v))
        elif isinstance(node, (list, tuple)):
            todo.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(node))))
        elif isinstance(node, str):
            shapes, commands = list(_shape_hits(node)), list(_command_hits(node))
            hits = shapes + commands
            if hits:
                found.append(Finding(where, hits[0][0], False, tuple(h for _, h in hits), in_command=not shapes))
    found.sort(key=lambda f: f.path)
    return found


def find_secrets(doc: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """``(field path, message)`` for every credential-like key or value in ``doc``."""
    for f in scan(doc, path):
        yield f.path, f.message


def secret_texts(findings: Iterable[Finding]) -> tuple[str, ...]:
    """The texts :func:`scrub` must remove, longest first (so a prefix never survives a longer hit)."""
    texts = {t for f in findings for t in f.values if t and len(t) >= 3}
    return tuple(sorted(texts, key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of ``secrets`` (and any credential shape) replaced."""
    for s in secrets:
        text = text.replace(s, REDACTED)
    for _, hit in list(_shape_hits(text)):
        text = text.replace(hit, REDACTED)
    return text


def redact(obj: Any) -> Any:
    """A deep copy for output: secret-named keys' values and credential-shaped text replaced."""
    if isinstance(obj, dict):
        return {k: (REDACTED if isinstance(k, str) and isinstance(v, str) and v and _secret_key(k)
                    else redact(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


@functools.lru_cache(maxsize=1 << 16)
def redact_text(text: str) -> str:
    """``text`` for output: a private key as a whole, other credential shapes where they appear.
    Cached: a plan document holds each name, type and URN several times, and is redacted again
    when rendered (a pure function of the text, so the cache changes no answer)."""
    if any(True for _ in _PRIVATE_KEY.pattern.finditer(text)):  # a private key: nothing of it is shown
        return REDACTED
    for _, hit in list(_shape_hits(text, output=True)):
        text = text.replace(hit, REDACTED)
    return text


@functools.lru_cache(maxsize=1 << 12)
def _secret_key(key: str) -> bool:
    return is_secret_name(key)
