// Charts wider than a phone scroll sideways: open them at "now", their right edge, after
// the page loads and after each live refresh swaps a new one in.
function chartsAtNow(root) {
  (root || document).querySelectorAll(".chart-wrap").forEach(function (wrap) {
    wrap.scrollLeft = wrap.scrollWidth;
    labelsInView(wrap);
    wrap.addEventListener("scroll", function () { labelsInView(wrap); }, { passive: true });
  });
}

// A label the scrolled view cuts in half reads as a stray letter ("n" of "−40 min"): only
// labels wholly in view are shown.
function labelsInView(wrap) {
  var view = wrap.getBoundingClientRect();
  wrap.querySelectorAll("svg text").forEach(function (label) {
    label.style.visibility = "";
    var box = label.getBoundingClientRect();
    var cut = box.left < view.left - 0.5 || box.right > view.right + 0.5;
    label.style.visibility = cut ? "hidden" : "";
  });
}
document.addEventListener("DOMContentLoaded", function () { chartsAtNow(); });
document.addEventListener("htmx:afterSwap", function (event) { chartsAtNow(event.target); });

// A job's whole output on its page: read from where the page stopped, again and again while
// the job may print more, until the portal says nothing will follow. The page keeps the
// last SHOWN_BYTES; all of it is a download away.
var SHOWN_BYTES = 2 * 1024 * 1024;
function followOutput(section) {
  var text = section.querySelector("#output-text"), state = section.querySelector("#output-state");
  var rankBox = section.querySelector("#output-rank"), follow = section.querySelector("#output-follow");
  var offset = 0, decoder = new TextDecoder(), reading = 0, dropped = false;
  function start() {
    reading += 1; offset = 0; text.textContent = ""; dropped = false;
    decoder = new TextDecoder(); read(reading);
  }
  function read(turn) {
    if (turn !== reading) return;  // the rank changed: that reader stops
    fetch(section.dataset.url + "?rank=" + rankBox.value + "&offset=" + offset, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.arrayBuffer().then(function (body) { return [response.headers, body]; });
      })
      .then(function (answer) {
        if (turn !== reading) return;
        var headers = answer[0], body = answer[1];
        ranks(headers.get("X-QP-Ranks"));
        text.textContent += decoder.decode(body, { stream: true });
        if (text.textContent.length > SHOWN_BYTES) {
          text.textContent = text.textContent.slice(-SHOWN_BYTES); dropped = true;
        }
        if (follow.checked) text.scrollTop = text.scrollHeight;
        offset = Number(headers.get("X-QP-Next-Offset"));
        var complete = headers.get("X-QP-Complete") === "true";
        state.textContent = (complete ? "All of it: " : "So far: ") + offset.toLocaleString() + " bytes" +
          (dropped ? " (the page shows the last 2 MB; download all of it above)" : "") +
          (complete ? "." : (body.byteLength ? "" : " — waiting for more…"));
        if (!complete) setTimeout(function () { read(turn); }, body.byteLength ? 0 : 1000);
      })
      .catch(function (error) {
        state.textContent = "Could not read the output (" + error.message + "); trying again…";
        setTimeout(function () { read(turn); }, 3000);
      });
  }
  function ranks(list) {
    if (!list) return;
    var wanted = list.split(",");
    if (wanted.length === rankBox.options.length) return;
    var chosen = rankBox.value;
    rankBox.innerHTML = "";
    wanted.forEach(function (rank) { rankBox.add(new Option(rank, rank, false, rank === chosen)); });
  }
  rankBox.addEventListener("change", start);
  start();
}
document.addEventListener("DOMContentLoaded", function () {
  var section = document.getElementById("whole-output");
  if (section) followOutput(section);
});
