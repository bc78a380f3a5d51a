// The report's stylesheet (written beside the pages) and script (inlined in each page) (no network:
// nothing is fetched). The script links graph nodes, schedule rows and generated lines: clicking
// (or hovering) anything with data-node="ID" or data-nodes="ID ID" highlights everything that names
// the same node. `page.html?click=ID` clicks node ID once the page has loaded (the browser test
// uses it); script errors are listed in #js-errors.
#pragma once

namespace kiln::report {

inline constexpr const char* kStyleCss = R"CSS(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #111827; background: #fafafa; }
header { background: #1f2937; color: #f9fafb; padding: 10px 20px; }
header a { color: #93c5fd; }
main { padding: 12px 20px 40px; }
h1 { font-size: 20px; margin: 4px 0; }
h2 { font-size: 17px; margin: 22px 0 8px; border-bottom: 1px solid #e5e7eb; }
h3 { font-size: 15px; margin: 14px 0 6px; }
code, pre, .src { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre { background: #fff; border: 1px solid #e5e7eb; padding: 8px; overflow: auto; max-height: 420px; margin: 4px 0; }
table { border-collapse: collapse; background: #fff; }
td, th { border: 1px solid #e5e7eb; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; }
.muted { color: #6b7280; }
.pill { display: inline-block; border-radius: 9px; padding: 0 7px; font-size: 12px; background: #e5e7eb; margin-right: 4px; }
.pill.break { background: #fee2e2; color: #991b1b; }
.pill.recompile { background: #fef3c7; color: #92400e; }
.pill.graph { background: #dbeafe; color: #1e40af; }
.pill.guards { background: #dcfce7; color: #166534; }
.event { margin: 3px 0 3px 12px; }
.two { display: grid; grid-template-columns: minmax(300px, 1fr) minmax(300px, 1fr); gap: 16px; align-items: start; }
.panel { position: relative; background: #fff; border: 1px solid #e5e7eb; padding: 8px; overflow: auto; max-height: 640px; }
.panel svg { max-width: 100%; height: auto; }
.src { background: #fff; white-space: pre; counter-reset: none; }
.src .ln { display: block; padding-right: 8px; }
.src .ln[data-nodes] { cursor: pointer; }
.src .ln:before { content: attr(data-n); display: inline-block; width: 3.2em; color: #9ca3af; text-align: right; margin-right: 10px; user-select: none; }
.tok-kw { color: #7c3aed; font-weight: 600; } .tok-ty { color: #0369a1; } .tok-num { color: #b45309; }
.tok-str { color: #15803d; } .tok-com { color: #6b7280; font-style: italic; } .tok-pre { color: #be185d; }
g.node { cursor: pointer; }
g.node text { font: 11px Helvetica, Arial, sans-serif; fill: #111827; }
g.node text.shape { fill: #4b5563; }
g.node.saved rect, g.node.saved polygon, g.node.saved path { stroke: #dc2626; stroke-width: 2.5; }
g.node.recomputed rect, g.node.recomputed polygon, g.node.recomputed path { stroke: #2563eb; stroke-dasharray: 4 3; stroke-width: 2; }
g.node.hover rect, g.node.hover polygon, g.node.hover path { stroke: #f59e0b; stroke-width: 2.5; }
g.node.hl rect, g.node.hl polygon, g.node.hl path { stroke: #ea580c; stroke-width: 3.5; fill: #fed7aa; }
.src .ln.hover { background: #fef9c3; }
.src .ln.hl, tr.hl, .chip.hl { background: #fed7aa; }
.chip { display: inline-block; border: 1px solid #d1d5db; border-radius: 4px; padding: 0 4px; margin: 1px; cursor: pointer; font: 12px ui-monospace, monospace; }
#selection { position: sticky; top: 0; background: #fff7ed; border: 1px solid #fdba74; padding: 4px 8px; margin: 6px 0; min-height: 1.4em; z-index: 2; }
#js-errors:empty { display: none; }
#js-errors { color: #b91c1c; background: #fee2e2; }
details > summary { cursor: pointer; font-weight: 600; margin: 4px 0; }
.timeline text { font: 11px Helvetica, Arial, sans-serif; fill: #111827; }
)CSS";

inline constexpr const char* kReportJs = R"JS(
(function () {
  'use strict';
  function idsOf(el) {
    var s = el.getAttribute('data-nodes') || el.getAttribute('data-node') || '';
    return s.split(' ').filter(function (x) { return x.length > 0; });
  }
  function q(sel) { return Array.prototype.slice.call(document.querySelectorAll(sel)); }
  function named(id) {
    var e = CSS.escape(id);
    return q('[data-node="' + e + '"], [data-nodes~="' + e + '"]');
  }
  function mark(ids, cls) {
    q('.' + cls).forEach(function (e) { e.classList.remove(cls); });
    ids.forEach(function (id) { named(id).forEach(function (e) { e.classList.add(cls); }); });
  }
  var provenance = {};
  var data = document.getElementById('provenance');
  if (data) provenance = JSON.parse(data.textContent);
  function describe(ids) {
    if (!data) return ids.join(' ') + ' selected';
    return ids.map(function (id) {
      var p = provenance[id];
      if (!p) return id + ': no generated lines';
      return id + ' (' + p.op + '): ' + (p.kernel || 'no kernel') + ', lines ' + p.ranges;
    }).join('; ');
  }
  function select(ids) {
    mark(ids, 'hl');
    var status = document.getElementById('selection');
    if (status) status.textContent = ids.length ? describe(ids) : '';
    document.body.setAttribute('data-selected', ids.join(' '));
    // Scroll the source panel (not the page) to the first highlighted line.
    var first = q('.src .ln.hl')[0], panel = first && first.closest('.panel');
    if (panel) panel.scrollTop = Math.max(0, first.offsetTop - panel.clientHeight / 3);
  }
  document.addEventListener('click', function (ev) {
    var el = ev.target.closest('[data-node], [data-nodes]');
    if (el) select(idsOf(el));
  });
  document.addEventListener('mouseover', function (ev) {
    var el = ev.target.closest('[data-node], [data-nodes]');
    mark(el ? idsOf(el) : [], 'hover');
  });
  var click = new URLSearchParams(location.search).get('click');
  if (click) {
    var target = document.querySelector('svg [data-node="' + CSS.escape(click) + '"]') || document.getElementById(click);
    if (target) target.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    else throw new Error('?click=' + click + ': no such node or line on this page');
  }
  document.body.setAttribute('data-js', 'ready');
})();
)JS";

// Loaded first, in <head>: later script errors land in #js-errors.
inline constexpr const char* kErrorHookJs =
    "window.kilnErrors=[];window.onerror=function(m,s,l){window.kilnErrors.push(m+' "
    "('+s+':'+l+')');"
    "var e=document.getElementById('js-errors');if(e){var "
    "li=document.createElement('li');li.textContent=m+' ('+s+':'+l+')';e.appendChild(li);}};"
    "(function(){var "
    "ce=console.error;console.error=function(){window.onerror(Array.prototype.join.call(arguments,'"
    " '),'console',0);ce.apply(console,arguments);};})();";

}  // namespace kiln::report
