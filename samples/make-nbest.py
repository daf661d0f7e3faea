#!/usr/bin/env python3
"""make-nbest.py: writes nbest-train.tsv and nbest-test.tsv, the sample of
train-scorer.sh: n-best lists of a (made-up) transcriber, one hypothesis a
line as GROUP<TAB>LABEL<TAB>TEXT. In each group one hypothesis is right
(label 1); the others each carry one of the transcriber's usual misspellings.
The test lists are other sentences with the same kinds of errors."""
import os
import random

here = os.path.dirname(os.path.abspath(__file__))
errors = {"receive": "recieve", "the": "teh", "address": "adress", "separate": "seperate",
          "occurred": "occured", "until": "untill", "which": "wich", "believe": "beleive",
          "government": "goverment", "definitely": "definately", "tomorrow": "tommorow",
          "beginning": "begining", "friend": "freind", "weird": "wierd", "really": "realy"}
subjects = ["my friend", "the government", "our neighbour", "the teacher", "a reporter",
            "the doctor", "his sister", "the mayor"]
verbs = ["will receive", "did not believe", "wrote to the address", "waited until",
         "really wanted", "definitely saw", "asked which", "said it occurred"]
ends = ["the letter tomorrow", "the weird news", "a separate report", "the beginning of the year",
        "the answer from the government", "nothing really new", "which was weird",
        "a friend at the station"]


def groups(rng, n):
    out = []
    for _ in range(n):
        s = " ".join([rng.choice(subjects), rng.choice(verbs), rng.choice(ends)])
        words = s.split()
        spots = [i for i, w in enumerate(words) if w in errors]
        rng.shuffle(spots)
        hyps = [(1, s)]
        for i in spots[:3]:
            w = list(words)
            w[i] = errors[w[i]]
            hyps.append((0, " ".join(w)))
        if len(hyps) > 1:
            rng.shuffle(hyps)
            out.append(hyps)
    return out


def write(name, gs, first):
    with open(os.path.join(here, name), "w") as f:
        for g, hyps in enumerate(gs):
            for label, text in hyps:
                f.write("%d\t%d\t%s\n" % (first + g, label, text))


rng = random.Random(7)
write("nbest-train.tsv", groups(rng, 150), 1)
write("nbest-test.tsv", groups(rng, 12), 1001)
