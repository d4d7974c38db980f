"""The no-model extractive mode's pure algorithms: question splitting (questions.py), sentence selection (select.py)."""
