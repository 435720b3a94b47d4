"""Operations: what a user runs besides the pipeline itself (floor 2, see DESIGN.md)."""
