"""The capacity controller: gates one numeric field on a foreign object by a spot schedule."""
