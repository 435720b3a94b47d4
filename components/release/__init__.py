"""Release: what a blessed model passes before and while it is pushed (serving check, model card, atomic push)."""
