"""The live endpoints answer with the selectors' dicts as they are (see views.py
for their schemas); there is nothing to deserialize."""
