(function () {
  var rounds = Array.prototype.slice.call(document.querySelectorAll("section.round"));
  var tabs = Array.prototype.slice.call(document.querySelectorAll("button.tab"));
  var slider = document.getElementById("round-slider");
  var label = document.getElementById("round-label");
  var current = rounds.length - 1;
  function show(i) {
    if (i < 0 || i >= rounds.length) { return; }
    current = i;
    rounds.forEach(function (r, k) { r.hidden = k !== i; });
    tabs.forEach(function (t, k) { t.classList.toggle("current", k === i); });
    slider.value = String(i);
    label.textContent = rounds[i].getAttribute("data-label");
  }
  document.getElementById("round-prev").addEventListener("click", function () { show(current - 1); });
  document.getElementById("round-next").addEventListener("click", function () { show(current + 1); });
  slider.addEventListener("input", function () { show(parseInt(slider.value, 10)); });
  tabs.forEach(function (t, k) { t.addEventListener("click", function () { show(k); }); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowLeft") { show(current - 1); }
    if (e.key === "ArrowRight") { show(current + 1); }
  });
  show(current);
  document.body.setAttribute("data-js", "ready");
})();
