// reduce_motion, run in a frame just before it is captured (render/page/motion.py): the page brought to a
// still state that a second capture of the same page shows again. Best effort: motion a script draws
// itself (requestAnimationFrame, canvas) and animated images are left as they are.
async () => {
  const counts = {finished: 0, paused: 0, media: 0, sliders: 0};

  // CSS animations and transitions and Web Animations, shadow trees included: a finite one jumps to its
  // end (the state the page means to show), a looping one stops at the start of its first iteration.
  for (const animation of document.getAnimations()) {
    try {
      const timing = animation.effect ? animation.effect.getComputedTiming() : null;
      if (timing && Number.isFinite(timing.endTime) && animation.playbackRate > 0) {
        animation.finish();
        counts.finished += 1;
      } else {
        animation.pause();
        animation.currentTime = timing ? (animation.effect.getTiming().delay || 0) : 0;
        counts.paused += 1;
      }
    } catch (error) {
      // a detached or script-driven animation refusing the change: left as it is
    }
  }

  // Sliders whose autoplay would move on between two captures: stopped and shown at their first slide.
  const each = (selector, act) => {
    for (const element of document.querySelectorAll(selector)) {
      try {
        if (act(element) !== false) counts.sliders += 1;
      } catch (error) {
        // an instance of another version, or half set up
      }
    }
  };
  each('.swiper, .swiper-container', element => {
    const swiper = element.swiper;
    if (!swiper) return false;
    if (swiper.autoplay && swiper.autoplay.running) swiper.autoplay.stop();
    if (swiper.params && swiper.params.loop && swiper.slideToLoop) swiper.slideToLoop(0, 0, false);
    else swiper.slideTo(0, 0, false);
  });
  const bootstrap = window.bootstrap;
  const settling = [];
  each('.carousel', element => {
    const carousel = bootstrap && bootstrap.Carousel && bootstrap.Carousel.getInstance(element);
    if (!carousel) return false;
    carousel.pause();
    const first = () => {
      element.querySelectorAll('.carousel-item').forEach((item, index) => {
        item.classList.remove('carousel-item-start', 'carousel-item-end', 'carousel-item-next', 'carousel-item-prev');
        item.classList.toggle('active', index === 0);
      });
      element.querySelectorAll('[data-bs-slide-to]').forEach((button, index) => {
        button.classList.toggle('active', index === 0);
      });
    };
    // A slide under way ends in a callback of Bootstrap's own, on its transition's end (which the loop above
    // brought forward), that makes the next item active: shown at the first only once that has run, or the
    // callback would undo it before or between captures.
    if (!element.querySelector('.carousel-item-next, .carousel-item-prev')) {
      first();
      return;
    }
    settling.push(new Promise(resolve => {
      let done = false;
      const settle = () => {
        if (!done) {
          done = true;
          first();
          resolve();
        }
      };
      element.addEventListener('slid.bs.carousel', settle, {once: true});
      setTimeout(settle, 1000);
    }));
  });
  const jquery = window.jQuery;
  if (jquery && jquery.fn) {
    if (jquery.fn.slick) {
      each('.slick-initialized', element => {
        jquery(element).slick('slickPause');
        jquery(element).slick('slickGoTo', 0, true);
      });
    }
    if (jquery.fn.owlCarousel) {
      each('.owl-carousel.owl-loaded', element => {
        jquery(element).trigger('stop.owl.autoplay').trigger('to.owl.carousel', [0, 0]);
      });
    }
  }
  if (window.Flickity && window.Flickity.data) {
    each('.flickity-enabled', element => {
      const flickity = window.Flickity.data(element);
      if (!flickity) return false;
      flickity.stopPlayer();
      flickity.select(0, false, true);
    });
  }
  await Promise.all(settling);
  // A slide change above may have started transitions of its own: those end at once too.
  for (const animation of document.getAnimations()) {
    try {
      if (animation.playState === 'running' && Number.isFinite(animation.effect.getComputedTiming().endTime)) {
        animation.finish();
      }
    } catch (error) {
      // as above
    }
  }

  // Video and audio stop at their first frame; a capture waits (briefly) for that frame to be there: the seek
  // done ('seeked') and, for a video, a frame from before where it stopped handed to the compositor ('seeked'
  // alone came before the frame was drawn on a busy machine, and the capture showed the frame it stopped at).
  // Known lapse: on a busy machine Chromium sometimes keeps drawing the frame the video stopped at even after
  // reporting the first presented (1 to 3 captures in 100 beside three CPU-bound processes; every later capture
  // alike, so no wait helps). Neither a seek while it still plays nor a second seek changed that.
  const seeks = [];
  for (const media of document.querySelectorAll('video, audio')) {
    try {
      media.autoplay = false;
      media.pause();
      counts.media += 1;
      const stoppedAt = media.currentTime;
      if (stoppedAt !== 0 && media.readyState > 0) {
        seeks.push(new Promise(resolve => {
          let waiting = media.requestVideoFrameCallback ? 2 : 1;
          const one = () => { waiting -= 1; if (waiting === 0) resolve(); };
          media.addEventListener('seeked', one, {once: true});
          if (media.requestVideoFrameCallback) {
            const drawn = (now, frame) => {
              if (frame.mediaTime < stoppedAt) one(); else media.requestVideoFrameCallback(drawn);
            };
            media.requestVideoFrameCallback(drawn);
          }
          setTimeout(resolve, 1000);
        }));
        media.currentTime = 0;
      }
    } catch (error) {
      // a media element without a source
    }
  }
  await Promise.all(seeks);
  return counts;
}
