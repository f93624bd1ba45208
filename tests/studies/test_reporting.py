"""pfzoo.studies.reporting: what report scripts share."""

from pfzoo.studies.reporting import card_command, with_kept_section


def test_a_kept_section_follows_the_fresh_render_and_nothing_else_of_the_old_text_does():
    previous = "# Report\n\nold body\n\n## Kept\n\nkept body\n\n## Later\n\nold later\n"
    assert with_kept_section("# Report\n\nnew body\n", previous, "Kept") == "# Report\n\nnew body\n\n## Kept\n\nkept body\n"
    assert with_kept_section("# Report\n\nnew\n", "# Report\n\n## Kept\n\nlast\n", "Kept") == "# Report\n\nnew\n\n## Kept\n\nlast\n"
    assert with_kept_section("# Report\n\nnew\n", "# Report\n\nold\n", "Kept") == "# Report\n\nnew\n"


def test_a_cards_command_leaves_out_where_the_result_went_and_this_machines_folders():
    argv = ["--models", "dbn-binarized_mnist", "--data-root", "/data here", "--layer", "-1", "--write", "--zoo=/a/zoo"]
    assert card_command("scripts/feature_card.py", argv) == "python scripts/feature_card.py --models dbn-binarized_mnist --layer -1"
    assert card_command("scripts/x.py", ["--title", "two words"]) == "python scripts/x.py --title 'two words'"
