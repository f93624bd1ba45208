"""pfzoo.studies.reporting: what report scripts share."""

from pfzoo.studies.reporting import with_kept_section


def test_a_kept_section_follows_the_fresh_render_and_nothing_else_of_the_old_text_does():
    previous = "# Report\n\nold body\n\n## Kept\n\nkept body\n\n## Later\n\nold later\n"
    assert with_kept_section("# Report\n\nnew body\n", previous, "Kept") == "# Report\n\nnew body\n\n## Kept\n\nkept body\n"
    assert with_kept_section("# Report\n\nnew\n", "# Report\n\n## Kept\n\nlast\n", "Kept") == "# Report\n\nnew\n\n## Kept\n\nlast\n"
    assert with_kept_section("# Report\n\nnew\n", "# Report\n\nold\n", "Kept") == "# Report\n\nnew\n"
