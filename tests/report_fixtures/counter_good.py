class Counter:
    def __init__(self):
        self.value = 0

    def add(self, k):
        self.value += k
