"""Long multi-session conversations with facts stated, updated and asked about (bench/dialogue.py).

A conversation is a user talking with an assistant over several weeks: sessions of small talk, plans
and errands, in which the user states personal facts (where a sister lives, what car they drive, a
flight time, a wifi password, ...), later updates some of them, mentions the same people and things
in passing (distractors), and at the end asks about them in other words than the ones used to state
them ("Which town is Ines based in at the moment?" for "Ines just signed a lease on a flat in
Porto"). The answering turn of a question is the user turn that stated the current value.

Everything is drawn from a seeded random generator: the same seed gives the same conversations.
Templates were written to read like real chat, with paraphrase between statement and question as a
person would phrase it, not to favour any retrieval method.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

__all__ = ["Conversation", "Question", "Turn", "generate"]

NAMES = [
    "Ines",
    "Marta",
    "Jonas",
    "Priya",
    "Tomasz",
    "Aiko",
    "Lena",
    "Rafael",
    "Nadia",
    "Emil",
    "Sofia",
    "Kwame",
]
CITIES = [
    "Porto",
    "Lyon",
    "Leipzig",
    "Valencia",
    "Krakow",
    "Gothenburg",
    "Bologna",
    "Ghent",
    "Tallinn",
    "Seville",
]
CARS = ["Skoda Octavia", "Toyota Yaris", "VW Golf", "Renault Clio", "Mazda 3", "Volvo V60", "Fiat Panda"]
JOBS = [
    ("nurse", "the Riverside clinic"), ("data analyst", "Norvik Logistics"), ("teacher", "Hillcrest primary"),
    ("sous-chef", "Casa Lume"), ("architect", "Studio Brenner"), ("pharmacist", "Greenleaf pharmacy"),
]  # fmt: skip
BREEDS = ["beagle", "border collie", "dachshund", "labrador", "whippet", "corgi"]
PET_NAMES = ["Biscuit", "Pepper", "Miso", "Juniper", "Waffles", "Olive", "Rocket"]
FOODS = ["peanuts", "shellfish", "sesame", "kiwi", "celery"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
TIMES = ["6:40", "7:15", "9:05", "11:50", "13:20", "16:35", "18:10", "21:45"]


@dataclass(frozen=True)
class Turn:
    id: str
    speaker: str
    text: str
    timestamp: datetime


@dataclass(frozen=True)
class Question:
    text: str
    answer: str
    evidence: tuple[str, ...]  # ids of the turns stating the current value
    stale: tuple[str, ...] = ()  # ids of turns stating an earlier value
    kind: str = ""


@dataclass
class Conversation:
    id: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


@dataclass
class _Fact:
    kind: str
    state: list[str]  # statement templates (first value)
    update: list[str]  # update templates (new value); empty: never updated
    ask: list[str]  # question templates (other words)
    mention: list[str]  # distractor templates: the subject mentioned without the value
    values: list[str]
    subject: str = ""


def _facts(rng: random.Random) -> list[_Fact]:
    sister = rng.choice(NAMES)
    friend = rng.choice([n for n in NAMES if n != sister])
    cities = rng.sample(CITIES, 3)
    (job1, firm1), (job2, firm2) = rng.sample(JOBS, 2)
    return [
        _Fact(
            "sibling_city",
            [f"My sister {sister} just signed a lease on a flat in {{v}}.", f"{sister} finally found an apartment in {{v}}, she moves in next week."],
            [f"Big news: {sister} relocated to {{v}} for her new position.", f"{sister} packed up again, she's living in {{v}} now."],
            [f"Which town is {sister} based in at the moment?", "Remind me, where does my sibling reside these days?"],
            [f"{sister} called me last night, we talked for an hour about nothing.", f"I should send {sister} a birthday card soon."],
            cities[:2], subject=sister,
        ),
        _Fact(
            "car",
            ["I bought a used {v} last weekend, it drives like a dream.", "Picked up my new (well, second-hand) {v} today."],
            ["I sold the old car and got a {v} instead.", "Traded in my car, I'm driving a {v} now."],
            ["What vehicle do I have currently?", "Which motor am I getting around in these days?"],
            ["The car needs new tyres before winter.", "Parking near the office is a nightmare again."],
            rng.sample(CARS, 2),
        ),
        _Fact(
            "job",
            [f"I started working as a {job1} at {firm1} this month.", f"First week as {job1} at {firm1} done, exhausted but happy."],
            [f"I handed in my notice, next month I join {firm2} as a {job2}.", f"Officially switched jobs: I'm a {job2} at {firm2} now."],
            ["Who is my employer right now?", "Where do I earn my living at present?"],
            ["Work was hectic today, three meetings back to back.", "My manager wants the quarterly report by Friday."],
            [firm1, firm2],
        ),
        _Fact(
            "pet",
            ["We adopted a {v} puppy from the shelter, we named her {w}.", "Meet the newest family member: a {v} called {w}!"],
            [],
            ["What is our dog called?", "What name did we give the hound we brought home?"],
            ["The puppy chewed through another charging cable.", "Walks in the rain are less fun with a wet dog in the hallway."],
            [rng.choice(BREEDS)], subject=rng.choice(PET_NAMES),
        ),
        _Fact(
            "allergy",
            ["The allergist confirmed it: I react badly to {v}.", "Turns out I'm allergic to {v}, no more of that for me."],
            [],
            ["Is there any food I have to avoid for medical reasons?", "What ingredient triggers a reaction in me?"],
            ["I tried a new curry recipe tonight, too spicy.", "Doctor's appointment went fine, just a routine check."],
            [rng.choice(FOODS)],
        ),
        _Fact(
            "flight",
            [f"My flight to {cities[2]} leaves on the 14th at {{v}}.", f"Booked the trip to {cities[2]}, departure at {{v}} on the 14th."],
            ["The airline rescheduled, we now depart at {v}.", "Flight got moved, new departure time is {v}."],
            ["What time does my plane take off?", "When exactly am I leaving by air?"],
            [f"I still need to buy a guidebook for {cities[2]}.", "Packing lists are the worst part of travelling."],
            rng.sample(TIMES, 2),
        ),
        _Fact(
            "climbing",
            ["I go bouldering every {v} evening with the club.", "Climbing night is {v}, don't book me then."],
            ["I moved my climbing sessions to {v} mornings.", "Club changed the schedule, climbing is on {v} now."],
            ["On which day do I do my rock sport?", "When is my weekly wall session?"],
            ["My forearms are sore from the last session.", "Thinking about buying new shoes for the gym."],
            rng.sample(DAYS, 2),
        ),
        _Fact(
            "wifi",
            ["The guest wifi password is {v}, in case anyone asks.", "For visitors: the wifi key is {v}."],
            ["I changed the router passphrase to {v}.", "New wifi password at home: {v}."],
            ["What should guests type to get online at my place?", "What's the network code for people visiting me?"],
            ["The router keeps dropping the connection in the evening.", f"{friend} complained the internet was slow at my place."],
            [f"{rng.choice(['blue', 'amber', 'quiet', 'north'])}-{rng.choice(['fox', 'harbor', 'maple', 'comet'])}-{rng.randint(10, 99)}" for _ in range(2)],
        ),
    ]  # fmt: skip


SMALL_TALK = [
    "Morning! Slept badly, the neighbours had a party.", "Can you suggest something quick for dinner?",
    "I watched that documentary about octopuses, fascinating.", "The weather is grey again, typical November.",
    "Remind me to water the plants tomorrow.", "I finally finished the puzzle, 1000 pieces!",
    "Do you think I should repaint the hallway?", "Coffee machine broke, what a disaster.",
    "My brother recommended a podcast about history, any good ones you know?",
    "I'm trying to read more this year, any novel suggestions?", "Groceries are so expensive lately.",
    "Went for a long run along the river this morning.", "Thinking of learning Spanish, is an app enough?",
    "The train was late again, twenty minutes.", "Made pancakes for breakfast, a small win.",
    "I keep forgetting to call the dentist.", "Any tips for sleeping better?",
    "The cinema had a special screening of an old western.", "Our team won the quiz night!",
    "I need a gift idea for a colleague who is leaving.", "Cleaned out the garage, found my old skateboard.",
    "Should I get a standing desk?", "The bakery on the corner closed, sad.", "My plants finally have new leaves.",
]  # fmt: skip
ASSISTANT = [
    "That sounds like a lot, hope the rest of the day is calmer.", "Good to know, I'll keep that in mind.",
    "Nice! Tell me more if you like.", "Here is an idea: keep it simple and see how it goes.",
    "Congratulations, that's great news.", "Sorry to hear that, anything I can help with?",
    "Noted. Anything else on your mind today?", "That's a good plan.", "Interesting, I hadn't thought of that.",
]  # fmt: skip


def generate(seed: int, *, sessions: int = 20, turns_per_session: int = 36) -> Conversation:
    """One conversation: `sessions` sessions of about `turns_per_session` turns, then the questions."""
    rng = random.Random(seed)
    conversation = Conversation(id=f"c{seed:03d}")
    facts = _facts(rng)
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC) + timedelta(days=rng.randint(0, 60))
    # Plan: each fact stated in the first quarter, updated (if it can be) in the middle third; the
    # last sessions are everyday talk, as before any question a person asks weeks later.
    plan: dict[int, list[tuple[_Fact, int]]] = {}
    for fact in facts:
        plan.setdefault(rng.randint(0, sessions // 4), []).append((fact, 0))
        if fact.update:
            plan.setdefault(rng.randint(sessions // 3, 2 * sessions // 3), []).append((fact, 1))
    evidence: dict[str, list[str]] = {f.kind: [] for f in facts}
    when = start
    number = 0

    def say(speaker: str, text: str) -> str:
        nonlocal number, when
        number += 1
        when += timedelta(minutes=rng.randint(1, 9))
        turn = Turn(id=f"{conversation.id}-t{number:04d}", speaker=speaker, text=text, timestamp=when)
        conversation.turns.append(turn)
        return turn.id

    for session in range(sessions):
        when = start + timedelta(days=session * rng.randint(3, 6), hours=rng.randint(0, 10))
        events = plan.get(session, [])
        slots = sorted(rng.sample(range(turns_per_session // 2), min(len(events), turns_per_session // 2)))
        for position in range(turns_per_session // 2):
            if slots and position == slots[0]:
                slots.pop(0)
                fact, stage = events.pop(0)
                template = rng.choice(fact.state if stage == 0 else fact.update)
                value = fact.values[stage] if stage < len(fact.values) else fact.values[-1]
                text = template.format(v=value, w=fact.subject)
                evidence[fact.kind].append(say("user", text))
            elif rng.random() < 0.25 and (known := [f for f in facts if evidence[f.kind]]):
                fact = rng.choice(known)  # people mention what they have told about, not before
                say("user", rng.choice(fact.mention))
            else:
                say("user", rng.choice(SMALL_TALK))
            say("assistant", rng.choice(ASSISTANT))
    for fact in facts:
        stated = evidence[fact.kind]
        answer = fact.subject if fact.kind == "pet" else fact.values[len(stated) - 1] if stated else ""
        conversation.questions.append(
            Question(
                text=rng.choice(fact.ask),
                answer=answer,
                evidence=tuple(stated[-1:]),
                stale=tuple(stated[:-1]),
                kind=fact.kind,
            )
        )
    return conversation
