"""Drops every add of 3: a bug only a particular step shows."""


class Counter:
    def __init__(self):
        self.value = 0

    def add(self, k):
        if k != 3:
            self.value += k
