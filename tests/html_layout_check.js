// The layout check run in each page; see tests/html_layout_check.py.
function ksCheck(doc, win, MIN_ID_EM) {
  const out = [];
  const TOL = 1.5;
  const short = s => { s = (s || '').replace(/\s+/g, ' ').trim(); return s.length > 70 ? s.slice(0, 67) + '...' : s; };
  const where = e => {
    let p = e, path = [];
    while (p && p.nodeType === 1 && path.length < 4) {
      path.unshift(p.tagName.toLowerCase() + (p.id ? '#' + p.id : '') + (p.className && typeof p.className === 'string'
        ? '.' + p.className.trim().split(/\s+/).join('.') : ''));
      if (p.id) break;
      p = p.parentElement;
    }
    return path.join('>');
  };
  doc.querySelectorAll('details').forEach(d => { d.open = true; });  // a reader opens them: check them open
  const de = doc.documentElement;
  if (de.scrollWidth > win.innerWidth + TOL)
    out.push(`page: scrolls sideways, ${de.scrollWidth}px of content in a ${win.innerWidth}px window`);
  const cards = [...doc.querySelectorAll('.panel, .ks-report, nav, h1')];
  const cardOf = e => e.closest('.panel, .ks-report, nav, h1');
  const pageR = {left: 0, right: win.innerWidth};
  for (const card of cards) {
    if (card.scrollWidth > card.clientWidth + TOL)
      out.push(`overflow: ${where(card)} scrolls sideways (${card.scrollWidth}px of content in ${card.clientWidth}px)`);
    const cr = card.getBoundingClientRect();
    if (cr.right > pageR.right + TOL || cr.left < pageR.left - TOL)
      out.push(`overflow: ${where(card)} reaches past the page (${Math.round(cr.left)}..${Math.round(cr.right)}px)`);
  }
  // every element and every text line against its card and its table cell
  const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT);
  const range = doc.createRange();
  let n;
  const seen = new Set();
  while ((n = walker.nextNode())) {
    const text = n.data;
    if (!text.trim()) continue;
    const parent = n.parentElement;
    if (!parent || parent.closest('style, script, title, #ks-check')) continue;
    const svgRoot = parent.closest('svg');
    range.selectNodeContents(n);
    const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0);
    if (!rects.length) continue;  // not displayed
    const card = cardOf(parent);
    const cr = card ? card.getBoundingClientRect() : pageR;
    for (const r of rects) {
      if (r.right > cr.right + TOL || r.left < cr.left - TOL) {
        const key = 'o' + where(parent) + short(text);
        if (!seen.has(key)) { seen.add(key);
          out.push(`overflow: "${short(text)}" in ${where(parent)} spans ${Math.round(r.left)}..${Math.round(r.right)}px, its card ${Math.round(cr.left)}..${Math.round(cr.right)}px`); }
        break;
      }
    }
    if (svgRoot) {
      const sr = svgRoot.getBoundingClientRect();
      for (const r of rects)
        if (r.left < sr.left - TOL || r.right > sr.right + TOL || r.top < sr.top - TOL || r.bottom > sr.bottom + TOL) {
          out.push(`svg clipped: "${short(text)}" at ${Math.round(r.left)}..${Math.round(r.right)}px, its svg ${Math.round(sr.left)}..${Math.round(sr.right)}px`);
          break;
        }
      continue;
    }
    const cell = parent.closest('td, th');
    if (cell) {
      const cellR = cell.getBoundingClientRect();
      for (const r of rects)
        if (r.right > cellR.right + TOL || r.left < cellR.left - TOL) {
          out.push(`past its cell: "${short(text)}" in ${where(parent)} spans ${Math.round(r.left)}..${Math.round(r.right)}px, the cell ${Math.round(cellR.left)}..${Math.round(cellR.right)}px`);
          break;
        }
    }
    if (rects.length < 2) continue;  // on one line: no word of it was broken
    // words: runs of non-space; a browser may break after a hyphen, a slash or a dash, so split there too
    const style = win.getComputedStyle(parent);
    const mayBreak = style.overflowWrap === 'anywhere' || style.wordBreak === 'break-all'
      || style.wordBreak === 'break-word';
    const box = cell || parent.closest('p, li, h1, h2, h3, div, section, summary, caption, nav') || parent;
    const bs = win.getComputedStyle(box);
    const boxWidth = box.getBoundingClientRect().width - parseFloat(bs.paddingLeft) - parseFloat(bs.paddingRight);
    const em = parseFloat(style.fontSize);
    const re = /[^\s\-\/\u2013\u2014\u2010]+[\-\/\u2013\u2014\u2010]*/g;
    let m;
    while ((m = re.exec(text))) {
      const w = m[0];
      if (w.length < 2) continue;
      range.setStart(n, m.index); range.setEnd(n, m.index + w.length);
      const wr = [...range.getClientRects()].filter(r => r.width > 0);
      const tops = new Set(wr.map(r => Math.round(r.top)));
      if (tops.size < 2) continue;
      // the word is on two lines or more: find where it broke
      let prevTop = null, at = -1;
      for (let i = 0; i < w.length; i++) {
        range.setStart(n, m.index + i); range.setEnd(n, m.index + i + 1);
        const cr2 = range.getClientRects();
        if (!cr2.length) continue;
        const t = Math.round(cr2[0].top);
        if (prevTop !== null && t > prevTop + 2) { at = i; break; }
        prevTop = t;
      }
      if (at < 1 || !/[\p{L}\p{N}]/u.test(w[at - 1]) || !/[\p{L}\p{N}]/u.test(w[at])) continue;  // at a break point
      range.setStart(n, m.index); range.setEnd(n, m.index + w.length);
      const ctx = doc.createElement('canvas').getContext('2d');
      ctx.font = style.font;
      const wordWidth = ctx.measureText(w).width;
      if (mayBreak && boxWidth + TOL >= Math.min(wordWidth, MIN_ID_EM * em)) continue;  // a long name, broken on purpose
      out.push(`broken word: "${short(w.slice(0, at))}|${short(w.slice(at))}" in ${where(parent)}, ${Math.round(boxWidth)}px wide for a ${Math.round(wordWidth)}px word` + (mayBreak ? ' (breakable name in a too narrow cell)' : ''));
    }
  }
  return out;
}
