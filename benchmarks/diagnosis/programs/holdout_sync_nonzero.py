"""sync-in-loop, inference (holdout): a detection-style fp16 head scores 20k anchors x 80 classes for each of
32 images, then post-processes each image in a Python loop with data-dependent shapes: boolean-mask indexing
(scores[keep], boxes[keep]), torch.unique of the kept labels and a top-k of min(100, kept) scores; every one of
these asks the host how many elements survived, so the GPU drains and idles at each. Fixed: the same numbers
from fixed-shape tensors (torch.where, masked sums, a per-class any() and a top-100 of the masked scores), for
the whole batch at once, with no host round trip until the step's end."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = None
SIZES = {"full": dict(images=32, anchors=20000, dim=256, hidden=1024, classes=80, topk=100, thresh=0.575),
         "tiny": dict(images=3, anchors=40, dim=8, hidden=16, classes=5, topk=4, thresh=0.575)}


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    torch.manual_seed(0)
    head = torch.nn.Sequential(torch.nn.Linear(s["dim"], s["hidden"]), torch.nn.ReLU(),
                               torch.nn.Linear(s["hidden"], s["hidden"]), torch.nn.ReLU(),
                               torch.nn.Linear(s["hidden"], s["classes"] + 4)).to(dev, dtype).eval()
    feats = [torch.randn(s["images"], s["anchors"], s["dim"], device=dev, dtype=dtype) for _ in range(2)]
    state = {"i": 0}
    k, n_cls, thr = s["topk"], s["classes"], s["thresh"]

    def postprocess_loop(logits: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        rows = []
        for img in range(logits.shape[0]):
            scores, labels = logits[img].sigmoid().max(dim=-1)
            keep = scores > thr
            kept_scores = scores[keep]                      # data-dependent shape: a sync
            kept_boxes = boxes[img][keep]
            n_classes = torch.unique(labels[keep]).numel()  # another sync
            top = kept_scores.float().topk(min(k, kept_scores.numel())).values
            rows.append(torch.stack([kept_scores.float().sum(), kept_boxes.float().sum(),
                                     torch.tensor(float(kept_scores.numel()), device=logits.device),
                                     torch.tensor(float(n_classes), device=logits.device), top.sum()]))
        return torch.stack(rows)

    def postprocess_batched(logits: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        scores, labels = logits.sigmoid().max(dim=-1)       # (images, anchors)
        keep = scores > thr
        sf = scores.float()
        score_sum = torch.where(keep, sf, 0.0).sum(dim=1)
        box_sum = torch.where(keep[..., None], boxes.float(), 0.0).sum(dim=(1, 2))
        count = keep.sum(dim=1).float()
        hits = torch.zeros(keep.shape[0], n_cls, device=keep.device).scatter_add_(1, labels, keep.float())
        n_classes = (hits > 0).sum(dim=1).float()
        top = torch.where(keep, sf, float("-inf")).topk(min(k, sf.shape[1]), dim=1).values
        top_sum = torch.where(torch.isfinite(top), top, 0.0).sum(dim=1)
        return torch.stack([score_sum, box_sum, count, n_classes, top_sum], dim=1)

    post = postprocess_loop if variant == "defect" else postprocess_batched

    @torch.inference_mode()
    def step() -> torch.Tensor:
        x = feats[state["i"] % len(feats)]
        state["i"] += 1
        out = head(x)
        return post(out[..., 4:], out[..., :4])

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=15)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_sync_nonzero")


if __name__ == "__main__":
    main()
