"""shared/linkfix.py: links to a renamed page rewritten, every other byte kept."""

from __future__ import annotations

from shared.linkfix import rewrite
from shared.links import Names

IDS = Names({"Projects/Release Plan", "Projects/Notes", "Meeting Notes/Kickoff", "Archive/Plan",
             "Other/Release Plan Draft"})


def test_every_form_is_rewritten_and_the_rest_kept() -> None:
    text = ("\ufeff---\r\ntitle: Notes\r\n---\r\n"
            "See [[Release Plan]], [[Release Plan#Dates|the dates]] and ![[Projects/Release Plan]].\r\n"
            "Also [plan](Release%20Plan.md#top \"t\") and [p](<Release Plan.md>).\r\n"
            "Root [r](/Projects/Release%20Plan.md); other [[Release Plan Draft]]; `[[Release Plan]]`\r\n"
            "```\r\n[[Release Plan]]\r\n```\r\n")
    out, n = rewrite("Projects/Notes", text, "Projects/Release Plan", "Archive/Launch Plan", IDS)
    assert n == 6
    assert out == ("\ufeff---\r\ntitle: Notes\r\n---\r\n"
                   "See [[Launch Plan]], [[Launch Plan#Dates|the dates]] and "
                   "![[Archive/Launch Plan]].\r\n"
                   "Also [plan](../Archive/Launch%20Plan.md#top \"t\") and "
                   "[p](<../Archive/Launch Plan.md>).\r\n"
                   "Root [r](/Archive/Launch%20Plan.md); other [[Release Plan Draft]]; "
                   "`[[Release Plan]]`\r\n"
                   "```\r\n[[Release Plan]]\r\n```\r\n")


def test_a_bare_name_that_would_find_another_page_names_the_path() -> None:
    out, n = rewrite("Projects/Notes", "[[Release Plan|x]]\n", "Projects/Release Plan",
                     "Meeting Notes/Plan", IDS)
    # [[Plan]] would find Archive/Plan (shorter path): the whole new path is written
    assert (out, n) == ("[[Meeting Notes/Plan|x]]\n", 1)


def test_nothing_to_rewrite_is_the_same_text() -> None:
    text = "[[Kickoff]] and [x](Notes.md) and [[Nowhere]]\n"
    assert rewrite("Projects/Notes", text, "Projects/Release Plan", "X", IDS) == (text, 0)
