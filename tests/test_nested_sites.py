"""Inside a statement holding a site, a codemod that needs nothing but its sites' statements
(``skips_within_statements``) skips the statements, at any depth, that hold none: stage 1's
outline (:mod:`torchfix_device.prefilter.nested_sites`) matched with libcst's blocks
(:func:`torchfix_device.engine.statements.statements_within_without_sites`)."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst

from torchfix_device.codemods.catalog import all_codemods, lookup
from torchfix_device.engine import transform_unfiltered
from torchfix_device.engine.statements import statements_within_without_sites
from torchfix_device.prefilter import nested_sites
from torchfix_device.prefilter.candidates import parse_facts, statements_with_sites

TRAIN = textwrap.dedent("""\
    import torch


    @decorate
    def train(model, loader, cuda):
        total = 0
        for x, y in loader:
            if cuda:
                x = x.cuda()
            elif other:
                pass
            else:
                print('cpu')
            total += 1
        try:
            log(total)
        except ValueError as e:
            raise
        else:
            done = True
        finally:
            close()
        return total
""")


def test_the_outline_follows_every_block_to_the_sites() -> None:
    statement = ast.parse(TRAIN).body[1]
    line = TRAIN.splitlines().index("            x = x.cuda()") + 1
    outline = nested_sites.outline(statement, [(line, line)])
    assert outline == ((
        False,  # total = 0
        ((((True,), (False,)), False),),  # for: its if (then: the site; the elif: none), total += 1
        False, False,  # try, return
    ),)
    # a site covering the whole statement, or on its decorator line: the statement holds one
    assert nested_sites.outline(statement, [(4, 23)]) is True
    assert nested_sites.outline(statement, [(4, 4)]) == ((False, False, False, False),)
    assert nested_sites.outline(statement, []) is False
    try_lines = [TRAIN.splitlines().index("        raise") + 1]
    assert nested_sites.outline(statement, [(try_lines[0], try_lines[0])])[0][2] == ((False,), (True,), (False,), (False,))


def test_libcsts_blocks_match_the_outline() -> None:
    module = cst.parse_module(TRAIN)
    function = module.body[1]
    line = TRAIN.splitlines().index("            x = x.cuda()") + 1
    outline = nested_sites.outline(ast.parse(TRAIN).body[1], [(line, line)])
    skipped, deeper = statements_within_without_sites(function, outline)
    body = function.body.body
    assert skipped == [id(body[0]), id(body[2]), id(body[3])] and list(deeper) == [id(body[1])]
    loop = body[1]
    skipped, deeper = statements_within_without_sites(loop, deeper[id(loop)])
    assert skipped == [id(loop.body.body[1])] and list(deeper) == [id(loop.body.body[0])]
    guard = loop.body.body[0]
    skipped, deeper = statements_within_without_sites(guard, deeper[id(guard)])
    assert skipped == [id(guard.orelse)] and not deeper  # the `elif`, a block holding one `if`
    # counts the parsers give differently, or a suite: nothing skipped there
    assert statements_within_without_sites(function, ((False, False),)) == ([], {})
    suite = cst.parse_module("if a: b; c\n").body[0]
    assert statements_within_without_sites(suite, ((False, True),)) == ([], {})


def test_stage_one_outlines_only_for_a_codemod_that_skips_within_statements() -> None:
    facts = parse_facts(TRAIN)
    opted = lookup("TFD001")
    assert opted.skips_within_statements
    assert statements_with_sites(facts, opted).nested.keys() == {1}
    kept = next(c for c in all_codemods() if not c.skips_within_statements and c.sites(facts) is not None)
    assert statements_with_sites(parse_facts(TRAIN), kept).nested == {}


def test_skipping_within_statements_changes_no_result() -> None:
    """The same rewrite and findings whether the statements without a site are visited or not
    (every codemod, on a script whose sites sit deep in a long function)."""
    from torchfix_device.codemods import base

    source = TRAIN + textwrap.dedent("""\


        def evaluate(model, data):
            correct = 0
            for x, y in data:
                out = model(x)
                pred = out.max(1)[1]
                correct += pred.eq(y).sum()
                state = torch.load('m.pt')
            print(correct, state)
    """)
    fast = transform_unfiltered(source, all_codemods())
    opted = [c for c in all_codemods() if c.skips_within_statements]
    assert len(opted) >= 5
    try:
        for c in opted:
            c.skips_within_statements = False
        slow = transform_unfiltered(source, all_codemods())
    finally:
        for c in opted:
            c.skips_within_statements = True
    assert all(c.skips_within_statements for c in opted) and not base.Codemod.skips_within_statements
    assert fast.text == slow.text and fast.findings == slow.findings
    assert ".item()" in fast.text and ".to(device)" in fast.text
    assert statements_with_sites(parse_facts(source), lookup("TFD019")).nested  # it does skip there
