"""Builders for the retrieval tests: a small corpus of topics, embedded with a real embedder."""

from __future__ import annotations

import datetime as dt

import polars as pl

CORPUS = {
    "pets": ["Dogs are loyal animals that live with families.",
             "Cats sleep for most of the day.",
             "Feed your puppy three small meals daily."],
    "pets-copy": ["Dogs are loyal animals who live with families.",
                  "Parrots can learn to imitate words."],
    "cooking": ["Boil the pasta in salted water for ten minutes.",
                "Olive oil burns at high temperatures.",
                "Knead the bread dough until it is smooth."],
    "history": ["The Roman Empire built roads across Europe.",
                "Grace Hopper wrote one of the first compilers.",
                "Ancient Egyptians built the pyramids at Giza."],
    "weather": ["Heavy rain is expected in the north tomorrow.",
                "Snowstorms often close mountain passes in winter.",
                "A sunny and warm weekend is forecast."],
    "finance": ["Interest rates rose again this quarter.",
                "Diversify investments to reduce risk.",
                "The stock market fell sharply on Monday."],
    "space": ["The telescope photographed a distant galaxy.",
              "Astronauts trained for the mission to Mars.",
              "The rocket launch was delayed by wind."],
    "tech": ["Restart the router to fix the connection.",
             "Update the operating system to patch security flaws.",
             "Back up your files to an external drive."],
}


def corpus_frame(embedder, corpus=CORPUS, created=None) -> pl.DataFrame:
    rows = []
    for d, (doc, texts) in enumerate(corpus.items()):
        ids = [f"{doc}-{i}" for i in range(len(texts))]
        for i, text in enumerate(texts):
            rows.append({"doc_id": doc, "segment_id": ids[i], "text": text,
                         "segment_type": "paragraph", "position": i, "section": "Main",
                         "salience": 0.5,
                         "created_at": (created or {}).get(doc, dt.datetime(2024, 1, 1 + d)),
                         "neighbours_before": ids[:i][::-1], "neighbours_after": ids[i + 1:]})
    frame = pl.DataFrame(rows).with_columns(pl.col("position").cast(pl.Int32),
                                            pl.col("salience").cast(pl.Float32))
    vectors = embedder.encode(frame.get_column("text").to_list())
    return frame.with_columns(pl.Series("embedding", vectors).cast(
        pl.Array(pl.Float32, vectors.shape[1])))
