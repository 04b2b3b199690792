"""Word/byte counts for loglikelihood_rolling tasks (as lm-eval's wikitext, without detokenising)."""

import re


def process_results(doc, results):
    (loglikelihood,) = results
    words = len(re.split(r"\s+", doc["text"]))
    nbytes = len(doc["text"].encode("utf-8"))
    return {
        "word_perplexity": (loglikelihood, words),
        "byte_perplexity": (loglikelihood, nbytes),
        "bits_per_byte": (loglikelihood, nbytes),
    }
