package io.cloudprofiler.examples.flink;

/**
 * A synthetic ad event of {@code cloudprofiler gen send --synthetic} (shaped
 * like the Yahoo streaming benchmark's), deserialized by the object factory
 * ({@link AdEventParser}). A Flink POJO (public no-arg constructor, public
 * fields): no Kryo.
 */
public class AdEvent {
    /** The tuple id, from the framing (not the payload). */
    public long id;
    public String userId;
    public String pageId;
    public String adId;
    public String adType;
    public String eventType;
    /** Milliseconds since the epoch. */
    public long eventTime;
    public String ipAddress;
    /** Set by the job: the campaign of the ad (the benchmark's join, here a hash). */
    public int campaign;
    /** Set by the job: how many events of this campaign the count operator had seen, this one included. */
    public long seq;

    public AdEvent() {}

    @Override
    public String toString() {
        return "AdEvent{id=" + id + ", userId=" + userId + ", pageId=" + pageId + ", adId=" + adId + ", adType=" + adType
                + ", eventType=" + eventType + ", eventTime=" + eventTime + ", ipAddress=" + ipAddress + ", campaign="
                + campaign + ", seq=" + seq + "}";
    }
}
