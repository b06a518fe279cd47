"""The end of a session: judge every figure (confirming suspects), apply the failure policy,
profile failing cells, record baselines and write the report files."""
