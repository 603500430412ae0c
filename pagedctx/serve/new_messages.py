"""Which messages of a request are new to the session (the whole history each time;
branches and repeated questions).

OpenAI clients send the whole conversation with every request; some send a sliding window of it,
some only the latest message, some their instructions (system or developer messages) and then
only the latest message. The session holds the turns it has seen (its history). Messages are
compared by role and text (whitespace at the ends ignored). In this order:

1. **Lined up with the history's end.** The longest prefix of the request that is also a suffix of
   the held turns is held; the rest is new: the whole history (all held), a window (its overlap).
   Knuth-Morris-Pratt over the message sequence: linear in the two lengths.
2. **Instructions, then a window or the latest message.** Without such an overlap, leading
   system/developer messages equal to the session's latest instructions (its last run of
   system/developer turns) are held, and step 1 runs on the messages after them.
3. **Otherwise every message is new** (only the latest message: a question asked before is asked
   again and gets a new answer), unless one of them is an assistant message the session holds:
   then the request carries a copy of this session's history that does not end where the
   session's ends (another client went on from the same point, or a message was edited or
   dropped): it **diverged**, and nothing of it is added (the server refuses it: 409).

A retry (the client lost the reply and sends its request again) is not decided here: only the
last request answered can be retried, and the service knows it by its fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["INSTRUCTION_ROLES", "Reconciled", "Said", "reconcile"]

Said = tuple[str, str]  # (role, text)
INSTRUCTION_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True)
class Reconciled:
    """`new`: index of the first message not held. `diverged`: the index of a message showing that
    the request's history departs from the session's (nothing may be added), else None;
    `held_turn`: the session's turn it copies."""

    new: int
    diverged: int | None = None
    held_turn: int | None = None


def _norm(said: Said) -> Said:
    return said[0], said[1].strip()


def _overlap(held: Sequence[Said], sent: Sequence[Said]) -> int:
    """Length of the longest prefix of `sent` that is a suffix of `held` (KMP)."""
    if not held or not sent:
        return 0
    fail = [0] * len(sent)
    k = 0
    for i in range(1, len(sent)):
        while k and sent[i] != sent[k]:
            k = fail[k - 1]
        if sent[i] == sent[k]:
            k += 1
        fail[i] = k
    k = 0
    for item in held[-len(sent) :]:  # an overlap is never longer than `sent`
        while k and item != sent[k]:
            k = fail[k - 1]
        if item == sent[k]:
            k += 1  # reaches len(sent) only on the last item: the text is at most that long
    return k


def _tail(held: Sequence[Said], count: int) -> list[Said]:
    """The last `count` messages of `held` with text, normalised, in order: what the overlap with a
    request of `count` messages can reach (the history before them is never read)."""
    found: list[Said] = []
    i = len(held) - 1
    while i >= 0 and len(found) < count:
        said = _norm(held[i])
        if said[1]:
            found.append(said)
        i -= 1
    found.reverse()
    return found


def _latest_instructions(held: Sequence[Said]) -> list[Said]:
    """The session's last run of system/developer turns (empty when it has none); read from the
    end, only as far back as that run."""
    run: list[Said] = []
    for i in range(len(held) - 1, -1, -1):
        said = _norm(held[i])
        if not said[1]:
            continue
        if said[0] in INSTRUCTION_ROLES:
            run.append(said)
        elif run:
            break
    run.reverse()
    return run


def reconcile(held: Sequence[Said], sent: Sequence[Said]) -> Reconciled:
    """Where the new messages of `sent` start, given the turns `held` (see the module docstring).

    Held turns without text (after stripping) are skipped; `held_turn` indexes `held` as given.
    `held` is read from its end, as far back as `sent` is long (and, with instructions, to the
    session's latest run of them): a request costs what it sends, not the history held; only one
    that copies a held answer out of line scans the history (for that answer)."""
    m = [_norm(said) for said in sent]
    k = _overlap(_tail(held, len(m)), m)
    if k:
        return Reconciled(new=k)
    lead = 0
    while lead < len(m) and m[lead][0] in INSTRUCTION_ROLES:
        lead += 1
    if lead and m[:lead] == _latest_instructions(held):
        k = _overlap(_tail(held, len(m) - lead), m[lead:])
        if k:
            return Reconciled(new=lead + k)
    else:
        lead = 0
    copied = {text for role, text in m[lead:] if role == "assistant"}
    if not copied:
        return Reconciled(new=lead)
    answers: dict[str, int] = {}
    for i in range(len(held)):
        role, text = _norm(held[i])
        if role == "assistant" and text in copied:
            answers[text] = i
    for i in range(lead, len(m)):
        role, text = m[i]
        if role == "assistant" and text in answers:
            return Reconciled(new=lead, diverged=i, held_turn=answers[text])
    return Reconciled(new=lead)
