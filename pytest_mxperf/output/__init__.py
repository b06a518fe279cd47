"""What a session shows and writes: the terminal table, PNG plots, pytest-benchmark records
and JUnit properties."""
