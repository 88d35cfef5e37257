"""`cronctl run`, one module a job: the context a run happens in (`context`), planning the
windows (`planning`), the guards of one occurrence (`guards`), running occurrences
(`occurrence`) and closing what a dead cronctl left (`recovery`). `cronctl.run.once` ties them
together and keeps the names callers import from it.
"""
