"""Live display of runs (`--display_data=true`) and of stored episodes, through rerun."""
