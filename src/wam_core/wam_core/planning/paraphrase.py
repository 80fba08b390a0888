"""Paraphrase-robust planning: when the rules cannot read an instruction, words outside
their vocabulary are mapped onto it by meaning, with the embedding model the harness
already runs (all-MiniLM-L6-v2), and the rules read it again.

Only English words the rules do not know are candidates (articles, pronouns and the
rules' own words never move); each goes to the nearest vocabulary word, a verb, an
object class or a colour ("snatch" -> "grab", "icebox" -> "fridge", "crimson" ->
"red"), if their cosine similarity is at least ``threshold``. Below it the instruction
is refused with the word and its best match in the reason. Verbs the robot has no skill
for ("throw", "cut", "eat", ...) are refused by name, never mapped to a skill they
resemble (throwing is not dropping).
"""

from __future__ import annotations

import re

import numpy as np

from .plan import Plan, PlanError
from .rules import COLORS, OBJECTS, RulePlanner

# the rules' verbs, one word each (pick/put/... the patterns read)
VERBS = (
    'pick grasp grab take lift hold get fetch collect put place move bring carry '
    'transport set drop open close shut find locate release approach reach go navigate'
).split()
# words the rules read as they are: never candidates for mapping
KEEP = (
    set(VERBS)
    | set(OBJECTS)
    | COLORS
    | set(
        'the a an this that my some it them up down in into inside on onto to of from at near '
        'next and then with for me please look around scene let gripper over where is you '
        'could can would will kindly robot hey'.split()
    )
)
# things a person may ask that no skill does: refused by name
NO_SKILL = set(
    'throw toss cut slice chop eat bite paint colour color break smash hit kick push '
    'punch wash clean cook pour sing dance write draw fold burn squeeze crush shake'.split()
)
_WORD = re.compile(r"[a-z][a-z'-]*")


class SimilarityPlanner:
    name = 'similarity'

    def __init__(self, embedder, threshold: float = 0.6, rules: RulePlanner | None = None):
        self.rules = rules or RulePlanner()
        self.embedder = embedder  # wam_core.planning.embedding.SubtaskEmbedder
        self.threshold = threshold
        self.vocabulary = sorted(set(VERBS) | set(OBJECTS) | COLORS)
        self._vectors = np.stack([embedder.vector(w) for w in self.vocabulary])
        self.mapped = 0  # instructions the rules read only after mapping

    def nearest(self, word: str) -> tuple[str, float]:
        sims = self._vectors @ self.embedder.vector(word)
        i = int(np.argmax(sims))
        return self.vocabulary[i], float(sims[i])

    def rewrite(self, instruction: str) -> tuple[str, dict[str, str], list[str]]:
        """(instruction with unknown words mapped, {word: mapped}, [why not mapped])."""
        mapping, misses = {}, []
        for word in sorted(set(_WORD.findall(instruction.lower()))):
            if word in KEEP:
                continue
            if word in NO_SKILL:
                raise PlanError(f'no skill to {word!r}: the robot can {", ".join(VERBS[:12])}')
            best, sim = self.nearest(word)
            if sim >= self.threshold:
                mapping[word] = best
            else:
                misses.append(f'{word!r} (nearest {best!r}, similarity {sim:.2f})')
        if not mapping:
            return instruction, mapping, misses
        pattern = re.compile(r'\b(' + '|'.join(map(re.escape, mapping)) + r')\b', re.IGNORECASE)
        return pattern.sub(lambda m: mapping[m.group(1).lower()], instruction), mapping, misses

    def plan(self, instruction: str) -> Plan:
        try:
            return self.rules.plan(instruction)
        except PlanError as first:
            try:
                rewritten, mapping, misses = self.rewrite(instruction)
            except PlanError as exc:  # a skill the robot lacks, by name
                raise PlanError(f'{first}; {exc}') from None
            if not mapping:
                extra = f'; unknown: {", ".join(misses)}' if misses else ''
                raise PlanError(f'{first}{extra}') from None
            try:
                plan = self.rules.plan(rewritten)
            except PlanError as exc:
                raise PlanError(f'{exc} (read as {rewritten!r})') from None
        self.mapped += 1
        return Plan(plan.subtasks, self.name)
