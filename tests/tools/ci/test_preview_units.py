"""The preview's pieces on their own: the sticky comment against the fake GitHub API (paging, a wrong token,
edit instead of add), and the comment's length limit."""

from __future__ import annotations

import pytest

from gpucluster.tools.ci.github import GitHubError, upsert_comment
from gpucluster.tools.ci.preview import COMMENT_LIMIT, MARKER, Preview, StackResult, render_comment
from gpucluster.tools.ci.scope import Scope, stack_of
from tests.tools.ci.github_fake import TOKEN, FakeGitHub


@pytest.fixture
def github():
    fake = FakeGitHub([{"id": n, "pr": 7, "body": f"someone else's comment {n}"} for n in range(1, 151)])
    yield fake
    fake.close()


def test_the_comment_is_found_on_a_later_page_and_edited(github: FakeGitHub):
    github.comments.append({"id": 999, "pr": 7, "body": f"{MARKER}\nold preview"})
    assert upsert_comment(github.url, TOKEN, "acme/c", 7, f"{MARKER}\nnew preview") == ("updated", 999)
    assert [c["body"] for c in github.comments if c["id"] == 999] == [f"{MARKER}\nnew preview"]
    assert ("GET", "/repos/acme/c/issues/7/comments?per_page=100&page=2") in github.calls
    assert len(github.comments) == 151


def test_without_its_comment_one_is_created_with_the_marker(github: FakeGitHub):
    what, ident = upsert_comment(github.url, TOKEN, "acme/c", 7, "no marker in this body")
    assert what == "created" and github.comments[-1]["id"] == ident
    assert github.comments[-1]["body"].startswith(MARKER)
    assert upsert_comment(github.url, TOKEN, "acme/c", 7, "again")[0] == "updated"


def test_a_bad_token_is_one_clear_error(github: FakeGitHub):
    with pytest.raises(GitHubError, match="HTTP 401"):
        upsert_comment(github.url, "wrong", "acme/c", 7, "x")


def _result(stack: str, size: int, data_loss: bool = False) -> StackResult:
    return StackResult(stack, True, data_loss, {}, "\n".join("+ resource line " + str(n) for n in range(size // 20)))


def test_the_comment_stays_under_githubs_limit_and_says_what_was_cut():
    p = Preview(Scope(("a", "b", "c"), False, ()), [_result("a", 30_000), _result("b", 30_000, True), _result("c", 30_000)])
    body = render_comment(p)
    assert len(body) <= COMMENT_LIMIT
    assert "### `a`" in body and "### `b`" in body
    assert "1 more stack section(s) are in the job summary" in body
    assert "**Data loss** in `b`" in body.split("### `a`")[0]  # the warning is at the top, before any section
    whole = render_comment(p, limit=1 << 20)
    assert "### `c`" in whole and "job summary" not in whole


def test_stack_files_are_recognised_exactly():
    assert stack_of("stacks/Pulumi.slurm-p5.yaml") == "slurm-p5"
    assert stack_of("stacks/sub/Pulumi.x.yaml") is None
    assert stack_of("Pulumi.yaml") is None
