"""The numbers the docs quote are the tool's: every generated block of README.md and docs/*.md
(costsim.prose) is what the code computes now; a stale one fails here until
`python -m costsim.prose` writes it again."""

import re
from pathlib import Path

import pytest

from costsim import prose

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", prose.FILES)
def test_every_generated_block_is_current(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    assert prose.blocks(text), f"{name} has no generated block"
    fresh = prose.blocks(prose.regenerate(text, name))
    for block, old in prose.blocks(text).items():
        assert old == fresh[block], f"{name}: block {block!r} is stale: run `python -m costsim.prose`"


def test_every_generator_is_used_once():
    used = [b for name in prose.FILES for b in prose.blocks((ROOT / name).read_text(encoding="utf-8"))]
    assert sorted(used) == sorted(prose.BLOCKS)


def test_a_planted_stale_number_fails():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    old = prose.blocks(text)["readme-protocols"]
    stale = re.sub(r"\d\.\d{3}", "0.999", old, count=1)
    assert stale != old
    planted = text.replace(old, stale)
    assert prose.blocks(prose.regenerate(planted))["readme-protocols"] != stale
    with pytest.raises(ValueError, match="no generator"):
        prose.regenerate("<!-- costsim: nosuch -->\nx\n<!-- /costsim -->")
