"""Per-candidate invitations: a bundle says whose it is, and the coach can check it.

Without invitations a candidate types their own name at `submit`. With them, the coach's
homework file holds a secret (32 random bytes) and each candidate gets a file of their own
with their name and a token, HMAC-SHA256(secret, homework id + name). `submit` writes the name
and token from that file into the bundle; the review recomputes the token from the name and
rejects a bundle whose token is missing or belongs to another name. The secret never leaves
the coach's file, so a candidate, who holds only their own token, cannot make anyone else's
(nor change the name their token is bound to).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import unicodedata
from pathlib import Path

from grader.errors import KataError

MAX_NAME_CHARS = 100
SECRET_HEX = re.compile(r"[0-9a-f]{64}")


def new_secret() -> str:
    return secrets.token_hex(32)


def token_for(secret: str, homework_id: str, name: str) -> str:
    # The separator keeps ("hw-1", "2Ada") and ("hw-12", "Ada") apart.
    message = f"{homework_id}\n{name}".encode("utf-8")
    return hmac.new(bytes.fromhex(secret), message, hashlib.sha256).hexdigest()


def clean_name(name: str, where: str = "--candidates") -> str:
    """A candidate's name as it is bound: NFC, single spaces, 1-100 printable characters."""
    text = " ".join(unicodedata.normalize("NFC", name).split())
    if not text or len(text) > MAX_NAME_CHARS or not text.isprintable():
        raise KataError(f"{where}: {name[:40]!r} is not a name (1 to {MAX_NAME_CHARS} printable characters)",
                        hint='for example --candidates "Ada Lovelace,Grace Hopper"')
    return text


def parse_names(values: list[str]) -> list[str]:
    """`--candidates "Ada,Grace"` (repeatable) as clean, distinct names."""
    names: list[str] = []
    for value in values:
        names.extend(clean_name(part) for part in value.split(",") if part.strip())
    if not names:
        raise KataError("--candidates names nobody", hint='for example --candidates "Ada,Grace"')
    seen: dict[str, str] = {}
    for name in names:
        key = name.casefold()
        if key in seen:
            raise KataError(f"--candidates names {seen[key]!r} twice",
                            hint="two candidates with one name need telling apart, e.g. \"Ada L.\" and \"Ada K.\"")
        seen[key] = name
    return names


def file_slug(name: str) -> str:
    """`Ada Lovelace` -> `ada-lovelace`, for the candidate's file name (ASCII, may be empty)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:40]


def candidate_paths(coach_file: Path, names: list[str]) -> dict[str, Path]:
    """Each name's file beside the coach's: week1.toml -> week1.candidate-ada.toml."""
    paths: dict[str, Path] = {}
    for i, name in enumerate(names, start=1):
        slug = file_slug(name) or f"{i}"
        path = coach_file.with_name(f"{coach_file.stem}.candidate-{slug}.toml")
        other = next((n for n, p in paths.items() if p == path), None)
        if other is not None:
            raise KataError(f"{other!r} and {name!r} would share the file {path.name}",
                            hint="tell the names apart by more than case, accents or punctuation")
        paths[name] = path
    return paths


def invitation_problem(secret: str, homework_id: str, invited: tuple[str, ...], candidate: str,
                       token: str | None) -> str | None:
    """Why a bundle's name and token do not belong together, or None when they do."""
    if token is None:
        return (f"homework {homework_id} invites candidates by name, and this bundle (from {candidate!r}) "
                "carries no invitation token: it was submitted with a homework file that is not the "
                "candidate's own (or by an older kata)")
    if hmac.compare_digest(token, token_for(secret, homework_id, candidate)):
        return None
    owner = next((n for n in invited if hmac.compare_digest(token, token_for(secret, homework_id, n))), None)
    if owner is not None:
        return f"the bundle names {candidate!r}, but its invitation was issued to {owner!r}"
    return (f"the bundle names {candidate!r}, and its invitation token was not issued for homework "
            f"{homework_id} (forged, or from another homework's file)")
