"""Which messages of a request are new to the session (issue 15: the whole history each time).

OpenAI clients send the whole conversation with every request; some send a sliding window of it,
some only the latest message. The session holds the turns it has seen (its record). A message is
compared by role and text (whitespace at the ends ignored); the messages already held are the
longest prefix of the request that is also a suffix of the held turns: the whole history (all
held), a window (its overlap), or only the latest message (nothing held). The search is
Knuth-Morris-Pratt over the message sequence: linear in the two lengths.

A retry (the client never got the reply to its last request and sends the same messages again)
is a request that is a prefix of the held turns: nothing is new, and `answered` gives the
assistant turn the server recorded after it, so the reply is that answer, not a second one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Reconciled", "Said", "reconcile"]

Said = tuple[str, str]  # (role, text)


@dataclass(frozen=True)
class Reconciled:
    """`new`: index of the first message not held; `answered`: the held reply of a retried request."""

    new: int
    answered: int | None = None


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


def reconcile(held: Sequence[Said], sent: Sequence[Said]) -> Reconciled:
    """Where the new messages of `sent` start, given the turns `held` (see the module docstring)."""
    h = [_norm(s) for s in held]
    m = [_norm(s) for s in sent]
    if m and len(m) < len(h) and h[: len(m)] == m and m[-1][0] == "user" and h[len(m)][0] == "assistant":
        return Reconciled(new=len(m), answered=len(m))
    return Reconciled(new=_overlap(h, m))
