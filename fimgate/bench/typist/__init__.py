"""The accepting typist: a person who takes right suggestions, replayed against servers (`bench replay --accepting`)."""
